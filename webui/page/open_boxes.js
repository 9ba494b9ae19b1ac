() => {
  // The chat's boxes the person opened stay open across a reload: Gradio draws a finished box
  // folded. Each box is known by its title and its parents' titles (they name the task, its
  // model and its time), kept in this browser only.
  const KEY = "hugginggpt-open-boxes", MAX = 200, TITLE = "#chat .thought-group > .title";
  const read = () => {
    try { const v = JSON.parse(localStorage.getItem(KEY)); return Array.isArray(v) ? v : []; }
    catch { return []; }
  };
  const idOf = (title) => {
    const names = [];
    for (let g = title.closest(".thought-group"); g; g = g.parentElement.closest(".thought-group")) {
      names.unshift(g.querySelector(":scope > .title").textContent.trim());
    }
    return names.join(" > ");
  };
  const isOpen = (title) => !/rotate\(0/.test(title.querySelector(".arrow")?.style.transform || "rotate(0");
  document.addEventListener("click", (e) => {
    const title = e.isTrusted && e.target.closest && e.target.closest(TITLE);
    if (!title) return;
    setTimeout(() => {  // once Gradio has toggled it
      const id = idOf(title), open = read().filter((k) => k !== id);
      if (isOpen(title)) open.push(id);
      localStorage.setItem(KEY, JSON.stringify(open.slice(-MAX)));
    }, 50);
  }, true);
  // A box is opened by a click, as the person would; folding it again (a real click) forgets it.
  const restore = () => {
    const open = new Set(read());
    if (!open.size) return;
    for (const title of document.querySelectorAll(TITLE)) {
      const clicked = Number(title.dataset.hgClicked || 0);  // Gradio redraws it a moment later
      if (Date.now() - clicked < 1000 || isOpen(title) || !open.has(idOf(title))) continue;
      title.dataset.hgClicked = String(Date.now());
      title.click();
    }
  };
  let queued = false;  // once per frame, however much the chat redraws meanwhile
  const soon = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; restore(); });
  };
  new MutationObserver(soon).observe(document.body, { childList: true, subtree: true });
}
