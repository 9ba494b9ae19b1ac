"""The browser chat's logic, kept out of app.py: the page (page_layout, page, page_wiring),
conversations (chat), event rendering (render, render_text), upload checks (uploads), ZeroGPU
support (gpu) and the pages' Content-Security-Policy (headers). Imports gradio only where a page is
built."""
