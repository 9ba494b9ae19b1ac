() => {
  // A plan graph taken out of the page while Mermaid still draws it is kept in a hidden holder
  // until it is drawn. Gradio's chat hands Mermaid the diagrams it finds, loads Mermaid, then draws
  // them one by one; a diagram the chat replaced or removed meanwhile (the drawing with the final
  // states, another conversation picked, a box folded) is no longer in the document, and Mermaid,
  // which looks its drawing up there, throws "Cannot read properties of null (reading
  // 'getAttribute')" into the console. Parked here it is drawn and then dropped.
  const MAX_MS = 60000;  // a diagram Mermaid never gets to is dropped after this
  const holder = document.createElement("div");
  holder.setAttribute("aria-hidden", "true");
  holder.style.cssText = "position:fixed;left:-100000px;top:0;visibility:hidden;pointer-events:none";
  document.body.appendChild(holder);
  const drawn = (el) =>  // Mermaid draws in a temporary div, then puts the finished svg in place
    el.querySelector(":scope > svg") && !el.querySelector(":scope > div[id^='dmermaid-']");
  const tidy = () => {
    for (const el of [...holder.children]) {
      if (drawn(el) || Date.now() - Number(el.dataset.hgParked) > MAX_MS) el.remove();
    }
  };
  new MutationObserver((changes) => {
    for (const change of changes) {
      if (change.target === holder || holder.contains(change.target)) continue;
      for (const node of change.removedNodes) {
        if (node.nodeType !== Node.ELEMENT_NODE || node.isConnected) continue;
        const found = node.matches(".mermaid") ? [node] : node.querySelectorAll(".mermaid");
        for (const el of found) {
          if (drawn(el)) continue;
          el.dataset.hgParked = String(Date.now());
          holder.appendChild(el);
        }
      }
    }
    if (holder.children.length) tidy();
  }).observe(document.body, { childList: true, subtree: true });
  new MutationObserver(tidy).observe(holder, { childList: true, subtree: true });
  setInterval(() => holder.children.length && tidy(), 5000);
}
