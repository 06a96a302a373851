"""What the tests share that is not a test: helpers and simulations."""
