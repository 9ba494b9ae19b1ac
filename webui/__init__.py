"""The web layer, kept out of app.py: host/ (what every way in shares), doors/ (the OpenAI-compatible
API and MCP, over the host), chat/ (the chat engine over the host) and page/ (the Gradio page over the
chat engine). Imports gradio only where a page is built; never models_local."""
