"""What keeps data out of reach or out of history: the AES-GCM payload codec and its keys,
the codec server for the web UI, and the stores of results kept by reference."""
