// transcript report: the page's behaviour. Stored text only ever enters the DOM as text
// (textContent, createTextNode), never as markup.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const calls = data.calls;
  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The view of call i as `replay --at POINT --format json` prints it.
  function document_of(i) {
    const call = calls[i];
    return {
      session: data.session,
      messages: call.messages.map((m) => data.messages[m]),
      source: call.source,
      tokens: call.tokens,
      diagnostics: call.diagnostics,
    };
  }

  function part_text(part) {
    if (typeof part.text === "string") return part.text;
    if (part.kind === "tool_call") return part.name + " " + JSON.stringify(part.input);
    if (typeof part.content === "string") return part.content;
    const rest = Object.assign({}, part);
    delete rest.kind;
    return JSON.stringify(rest);
  }

  function preview(message) {
    const text = (message.parts || []).map(part_text).join(" ").replace(/\s+/g, " ");
    return text.length > 140 ? text.slice(0, 139) + "…" : text;
  }

  function message_node(message, position) {
    const box = el("article", "message role-" + message.role);
    const head = el("header", "", "[" + position + "] " + message.role);
    if (message.kind && message.kind !== "message") head.appendChild(el("span", "kind", " " + message.kind));
    head.appendChild(el("span", "id", " " + message.id));
    box.appendChild(head);
    for (const part of message.parts || []) {
      const body = el("pre", "part part-" + part.kind);
      body.textContent = part_text(part);
      box.appendChild(body);
    }
    return box;
  }

  // What entered and left the view since the call before (messages compared whole, as rendered).
  function diff_node(i) {
    const box = el("div", "diff");
    if (i === 0) {
      box.appendChild(el("p", "none", "The first call: nothing before it to compare with."));
      return box;
    }
    const before = new Set(calls[i - 1].messages);
    const after = new Set(calls[i].messages);
    const gone = calls[i - 1].messages.filter((m) => !after.has(m));
    const came = calls[i].messages.filter((m) => !before.has(m));
    box.appendChild(
      el("p", "", "Since call " + i + ": " + (calls[i].tokens - calls[i - 1].tokens).toLocaleString("en") +
        " tokens, " + gone.length + " messages left or changed, " + came.length + " entered")
    );
    const list = el("ul");
    for (const m of gone) list.appendChild(el("li", "gone", "− " + data.messages[m].role + ": " + preview(data.messages[m])));
    for (const m of came) list.appendChild(el("li", "came", "+ " + data.messages[m].role + ": " + preview(data.messages[m])));
    box.appendChild(list);
    return box;
  }

  function show_call(i) {
    const call = calls[i];
    const doc = document_of(i);
    for (const node of document.querySelectorAll("circle.call.selected")) node.classList.remove("selected");
    document.querySelector('circle.call[data-call="' + i + '"]').classList.add("selected");
    $("detail-title").textContent = "Call " + (i + 1) + " of " + calls.length + " (point " + call.point + ")";
    $("detail-meta").textContent = doc.messages.length + " messages, " + call.tokens.toLocaleString("en") +
      " tokens, source " + call.source;
    $("diff").replaceChildren(diff_node(i));
    $("view").replaceChildren(...doc.messages.map(message_node));
    $("view-json").textContent = JSON.stringify(doc);
    document.body.dataset.shown = String(call.point);
  }

  function show_compaction(point) {
    const c = data.compactions.find((x) => x.point === point);
    $("detail-title").textContent = "Compaction at point " + point;
    $("detail-meta").textContent = c.change + " · " + c.tokens_before.toLocaleString("en") + " → " +
      c.tokens_after.toLocaleString("en") + " tokens · summarizer " + c.summary_input_tokens.toLocaleString("en") +
      " in / " + c.summary_output_tokens.toLocaleString("en") + " out";
    $("diff").replaceChildren();
    $("view").replaceChildren();
    $("view-json").textContent = "";
    document.body.dataset.shown = "compaction " + point;
  }

  for (const node of document.querySelectorAll("circle.call")) {
    node.addEventListener("click", () => show_call(Number(node.dataset.call)));
  }
  for (const node of document.querySelectorAll("g.compaction")) {
    node.addEventListener("click", () => show_compaction(Number(node.dataset.point)));
  }
  document.addEventListener("keydown", (event) => {
    const shown = document.querySelector("circle.call.selected");
    const at = shown ? Number(shown.dataset.call) : -1;
    if (event.key === "ArrowRight" && at + 1 < calls.length) show_call(at + 1);
    if (event.key === "ArrowLeft" && at > 0) show_call(at - 1);
  });
  document.body.dataset.ready = "yes";
})();
