import jax

def repeated_square(x, n):
    for _ in range(n):  # range() needs a Python int
        x = x * x
    return x

jax.jit(repeated_square)(1.01, 3)
