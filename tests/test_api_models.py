"""API models through the workflow, as users run them: batch and online modes, tokens, cost."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from bouquet_eval.data.dataset import resolve_dataset
from bouquet_eval.planning.estimate import CHARACTERS_PER_TOKEN
from bouquet_eval.results.pages import run_page
from bouquet_eval.translators.openai_chat import OpenAIChatTranslator
from bouquet_eval.translators.prompt import build_prompt
from bouquet_eval.translators.request_cache import REQUEST_CACHE, RequestCache

from .chat_server import ChatServer
from .conftest import Workflow
from .workflow_configs import SAMPLE_DIRECTIONS, bounds_config

DIRECTIONS = [direction.name for direction in SAMPLE_DIRECTIONS[:2]]
PRICE = {"input": 2.0, "output": 8.0}
URL = "http://127.0.0.1:9/v1"  # the discard port: a dry run sends nothing


def api_config(dataset: Path, url: str, mode: str) -> dict:
    model = {
        "name": "api",
        "translator": "openai",
        "model": "test-model",
        "base_url": url,
        "api_key_env": None,
        "mode": mode,
        "batch_poll_interval": 0.01,
    }
    return bounds_config(
        dataset,
        shards=1,
        limit=3,
        directions={"list": DIRECTIONS},
        models=[model],
        prices={"api": PRICE},
    )


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_batch_and_online_runs_agree_and_cost_what_their_tokens_say(
    tmp_path: Path, dataset: Path
) -> None:
    translations, costs = {}, {}
    with ChatServer() as server:
        for mode in ("online", "batch"):
            workdir = tmp_path / mode
            workdir.mkdir()
            workflow = Workflow(workdir)
            workflow.write_config(api_config(dataset, server.url, mode))
            workflow.run()
            folder = workdir / "runs" / "api"
            translations[mode] = {p.name: p.read_bytes() for p in folder.glob("*.jsonl")}
            timing = rows(folder / "timing.csv")
            direction_costs = [
                (int(r["prompt_tokens"]) * PRICE["input"] + int(r["completion_tokens"]) * 8.0)
                / 1e6
                * (0.5 if mode == "batch" else 1.0)
                for r in timing
            ]
            assert [float(r["cost"]) for r in timing] == direction_costs
            (overall,) = [r for r in rows(folder / "summary.csv") if r["group"] == "all"]
            costs[mode] = float(overall["cost"])
            assert costs[mode] == sum(direction_costs) > 0
            manifest = json.loads((folder / "manifest.json").read_text())["entries"][-1]
            assert manifest["timing"]["cost"] == costs[mode]
        assert len(server.batches.batches) == 1
    assert translations["batch"] == translations["online"]
    assert len(translations["batch"]) == 2
    # The same tokens, at half the price.
    assert costs["batch"] == costs["online"] / 2


def test_the_run_page_names_each_models_tokens_and_cost() -> None:
    timing = {"prompt_tokens": 1200.0, "completion_tokens": 300.0, "cost": 0.0048}
    page = run_page({}, {"api": {"entries": [{"timing": timing}]}, "local": {"entries": [{}]}})
    assert page.count("prompt tokens 1,200; completion tokens 300; cost 0.0048.") == 1


def test_a_dry_run_estimates_requests_tokens_and_cost(tmp_path: Path, dataset: Path) -> None:
    workflow = Workflow(tmp_path)
    workflow.write_config(api_config(dataset, URL, "batch"))
    result = workflow.run("--dry-run")
    (line,) = [line for line in result.stderr.splitlines() if "will send" in line]
    prompts = [
        build_prompt(row.src_lang, row.tgt_lang, row.src_text)
        for direction in SAMPLE_DIRECTIONS[:2]
        for row in resolve_dataset({"path": str(dataset)}).load(direction, 3).itertuples()
    ]
    tokens = sum(round(len(prompt) / CHARACTERS_PER_TOKEN) for prompt in prompts)
    assert line.startswith(
        f"bouquet-eval: api will send 6 requests for 2 directions: about {tokens:,} "
        "input tokens (characters / 4) and "
    )
    assert ", costing about " in line
    assert not (tmp_path / "runs").exists()
    # An answer in the cache is a request not sent again.
    keyed = OpenAIChatTranslator(model="test-model", base_url=URL, api_key_env=None)
    cache = RequestCache(tmp_path / "runs" / "api" / REQUEST_CACHE)
    cache.append([(keyed.key(prompts[0]), "cached")])
    again = workflow.run("--dry-run").stderr
    assert "api will send 5 requests for 2 directions" in again


def test_a_run_that_stops_waiting_is_picked_up_by_the_same_command(
    workflow: Workflow, dataset: Path
) -> None:
    with ChatServer() as server:
        config = api_config(dataset, server.url, "batch")
        config["models"][0]["batch_wait"] = 0
        workflow.write_config(config)
        first = workflow.run(check=False)
        assert first.returncode != 0
        log = "".join(path.read_text() for path in (workflow.workdir / "logs").rglob("*.log"))
        assert "waiting for 1 batches (batch-1): 6 requests unanswered, 2 directions pending" in log
        assert "1 batches still pending after 0 s (batch-1); run the same command again" in log
        assert not list((workflow.workdir / "runs" / "api").glob("*.jsonl"))
        workflow.run()
        assert len(list((workflow.workdir / "runs" / "api").glob("*.jsonl"))) == 2
        assert len(server.batches.batches) == 1
        answered = Counter(server.batches.answered_prompts)
        assert len(answered) == 6 and set(answered.values()) == {1}
