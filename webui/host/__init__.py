"""What every way in shares (webui.host.host.Host) and the one place a visitor's run starts
(run_entry): settings, LLM clients and endpoints
(backends), who is calling (callers), slots, the token ledger (token_budget, charged_llm), uploads
and their quota, a visitor's settings, ZeroGPU, the words limits are named in. Never imports the
chat engine, a door or the page (tests/test_layers.py): conversations are the chat engine's."""
