"""Example workflows: a game master agent with the durable plan tool."""
