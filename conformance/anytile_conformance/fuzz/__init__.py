"""The differential fuzzer: random well-defined kernels run on a backend and on the reference
interpreter; a mismatch or crash is shrunk to a small reproducer saved as a runnable .py."""
