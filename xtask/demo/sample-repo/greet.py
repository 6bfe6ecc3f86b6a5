"""A tiny module the demo asks droid to extend."""


def greet(name):
    return "Hello, " + name + "!"
