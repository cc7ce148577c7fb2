import jax

seen = []

@jax.jit
def step(x):
    seen.append(x)  # keeps a tracer after tracing ends
    return x * 2

step(1.0)
seen[0] + 1
