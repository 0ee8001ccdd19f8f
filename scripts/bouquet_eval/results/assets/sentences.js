// The report's sentence page: per direction, a sample sentence and each model's worst ones.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const app = document.getElementById("app");
  const names = Object.keys(data.directions);

  function title(direction) {
    const [src, tgt] = direction.split("-");
    return (data.languages[src] || src) + " → " + (data.languages[tgt] || tgt) + "  (" +
      direction + ")";
  }

  function sentence(entry, id, only) {
    const [source, reference, outputs, scores] = entry.sentences[id];
    const items = [element("dt", {}, ["source"]), element("dd", { dir: "auto" }, [source || ""]),
      element("dt", {}, ["reference"]), element("dd", { dir: "auto" }, [reference || ""])];
    data.models.forEach((model, m) => {
      if (only !== undefined && only !== model) return;
      const value = scores[m] === null ? "–" : String(scores[m]);
      items.push(element("dt", {}, [model + " ", element("span", { class: "score" },
        [data.metric + " " + value])]), element("dd", { dir: "auto" }, [outputs[m] || ""]));
    });
    return element("dl", { class: "sentence", "data-id": id }, items);
  }

  const chooser = element("input", { list: "directions", id: "direction", size: "60",
    placeholder: "type a language name or code" });
  const list = element("datalist", { id: "directions" },
    names.map((name) => element("option", { value: name }, [title(name)])));
  const detail = element("div", { id: "detail" });
  app.append(element("label", {}, ["direction ", chooser]), list, detail);

  function show(direction) {
    const entry = data.directions[direction];
    if (!entry) return;
    const parts = [element("h2", {}, [title(direction)])];
    if (entry.sample) {
      parts.push(element("h3", {}, ["A sample sentence, every model"]),
        sentence(entry, entry.sample));
    }
    data.models.forEach((model) => {
      const worst = entry.worst[model] || [];
      parts.push(element("h3", {}, [model + ": its " + worst.length + " worst sentences on " +
        data.metric + (data.lower ? " (highest)" : " (lowest)")]));
      worst.forEach((id) => parts.push(sentence(entry, id, model)));
    });
    detail.replaceChildren(...parts);
    app.dataset.direction = direction;
  }

  chooser.addEventListener("change", () => show(chooser.value.trim()));
  if (names.length) { chooser.value = names[0]; show(names[0]); }
})();
