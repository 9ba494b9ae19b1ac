"""The Gradio page: its components (layout), its handlers (handlers.ChatPage), which event
calls which handler (wiring), the message actions, the review panel, Settings and the status line,
what the browser keeps (saved), and the app-level HTTP pieces (headers, metrics_route,
proxy_warning). Imports the chat engine and the host; no door imports it."""
