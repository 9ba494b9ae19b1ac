"""Files and URLs: the conversation's workspace, typed task outputs, the URL guard,
bounded readers of files a person hands over, content hashes. Imports nothing else of the package
but text helpers."""
