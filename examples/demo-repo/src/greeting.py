def greet(name: str) -> str:
    return "Hello, " + name
