"""One stream of directions through a translator, and who was in it when.

`translation_stream` hands a job's directions to any translator: a `BatchTranslator` takes them
as one stream (it pulls the next direction's prompts while finishing the previous ones); a
plain `Translator`, or a `RowTranslator`, gets them one call at a time. Either way the results
come back as `(position, translations)` as each direction finishes.

`Flight` keeps track of the directions the translator holds. When several are in flight at
once, each is credited an equal share of the wall time that passes: a direction's seconds are
its share of the job's translation time, and the seconds of all directions add up to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING

from bouquet_eval.translators import BatchError, BatchTranslator, RowTranslator, Translator

if TYPE_CHECKING:
    import pandas as pd

    from bouquet_eval.translators.prompt import PromptFn


class Flight:
    """Positions of the directions handed to the translator and not yet back, oldest first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()
        self._shares: dict[int, float] = {}
        self.pulled = 0
        self.landed = 0

    def take_off(self, position: int) -> None:
        self._share_out()
        self._shares[position] = 0.0
        self.pulled += 1

    def land(self, position: int) -> float:
        """The direction is back: its share of the wall time since it was handed over."""
        self._share_out()
        self.landed += 1
        return self._shares.pop(position)

    def in_flight(self) -> list[int]:
        return list(self._shares)

    def _share_out(self) -> None:
        now = self._clock()
        if self._shares:
            share = (now - self._last) / len(self._shares)
            for position in self._shares:
                self._shares[position] += share
        self._last = now


def translation_stream(
    translator: Translator | RowTranslator,
    prompt_fn: PromptFn,
    rows: Iterable[pd.DataFrame],
    flight: Flight,
) -> Generator[tuple[int, object], None, None]:
    """`(position, what the translator returned)` for each direction's sentences in `rows`,
    as each finishes. `rows` is read only as the translator takes directions.

    What comes back is not checked here: a translator may return anything.
    """
    if isinstance(translator, RowTranslator):
        for position, frame in enumerate(rows):
            flight.take_off(position)
            yield position, translator.translate_rows(frame)
        return

    def prompts() -> Iterator[list[str]]:
        for position, frame in enumerate(rows):
            flight.take_off(position)
            try:
                batch = [
                    prompt_fn(src_lang, tgt_lang, text)
                    for src_lang, tgt_lang, text in zip(
                        frame["src_lang"], frame["tgt_lang"], frame["src_text"], strict=True
                    )
                ]
            except Exception as error:
                detail = f"the prompt function failed: {type(error).__name__}: {error}"
                raise BatchError(position, detail) from error
            yield batch

    if isinstance(translator, BatchTranslator):
        yield from translator.translate_batches(prompts())
        return
    for position, batch in enumerate(prompts()):
        yield position, translator.translate(batch)
