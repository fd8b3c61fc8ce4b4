"""LLM providers: messages + a JSON Schema in, a validated object out, tokens and time counted."""
