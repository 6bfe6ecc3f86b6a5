from greet import greet

assert greet("Ada") == "Hello, Ada!"
print("ok")
