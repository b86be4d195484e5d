"""The product's test kit: an offline, scripted OpenAI-compatible model server and its scenarios."""
