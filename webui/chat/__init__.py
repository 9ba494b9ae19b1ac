"""The chat engine over the host: conversations (in memory and on disk), one request at a
time per conversation (engine), runs that outlive a tab (live_runs), turns done again in place,
review and re-runs, resuming a cut-off run, and the run rendered as chat messages (render,
render_text, plan_graph, safe_html, files). Imports the host; never a door or the page."""
