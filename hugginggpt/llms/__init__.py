"""The controller LLM: the interface and its call records (interface), any
OpenAI-compatible server (openai_compatible), the in-process chat model (local), and finding JSON in
a reply (jsontext)."""
