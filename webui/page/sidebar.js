() => {
  // The sidebar (conversations, Settings) starts closed, so that a phone shows the chat; on a wide
  // screen it opens at once, beside the chat. On a narrow one, where it covers the page, it closes
  // again once a conversation is picked or made.
  const WIDE = "(min-width: 769px)";
  const toggle = () => document.querySelector("#sidebar .toggle-button");
  const isOpen = () => document.querySelector("#sidebar")?.classList.contains("open");
  let tries = 0;
  const timer = setInterval(() => {  // the sidebar is drawn a moment after the page starts
    if (!toggle() && ++tries < 200) return;
    clearInterval(timer);
    toggle()?.setAttribute("aria-label", "Conversations and settings");  // Gradio's: "Toggle Sidebar"
    if (toggle() && window.matchMedia(WIDE).matches && !isOpen()) toggle().click();
  }, 50);
  // A window made narrow closes it, made wide opens it again.
  window.matchMedia(WIDE).addEventListener("change", (e) => { if (e.matches !== isOpen()) toggle()?.click(); });
  document.addEventListener("click", (e) => {
    const picked = e.isTrusted && e.target.closest && e.target.closest("#earlier label, #new-conversation");
    if (!picked || window.matchMedia(WIDE).matches) return;
    setTimeout(() => { if (isOpen()) toggle()?.click(); }, 150);  // once the pick is sent
  }, true);
}
