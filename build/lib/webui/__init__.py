"""The browser chat's logic, kept out of app.py: conversations (chat), event rendering (render),
upload checks (uploads), ZeroGPU support (gpu) and the
pages' Content-Security-Policy (headers). Imports gradio only where a page is built."""
