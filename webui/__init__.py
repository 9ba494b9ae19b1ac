"""The browser chat's logic, kept out of app.py: conversations (chat), event rendering (render),
upload checks (uploads) and ZeroGPU support (gpu). Imports gradio only where a page is built."""
