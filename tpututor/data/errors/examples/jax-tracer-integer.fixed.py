import jax

def repeated_square(x, n):
    for _ in range(n):
        x = x * x
    return x

square = jax.jit(repeated_square, static_argnames="n")
assert abs(float(square(1.01, n=3)) - 1.01 ** 8) < 1e-5
