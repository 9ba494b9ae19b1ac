"""The doors for other programs, over the Host (webui.host.host) that the page shares: the OpenAI-compatible
API (openai_api, with openai_messages) and the MCP tools (mcp_tools). A door turns its protocol into a
call (webui.doors.calls) and the call's events into its protocol; no door imports another door or the page."""
