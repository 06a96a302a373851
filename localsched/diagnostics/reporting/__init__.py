"""The pages: the performance report and ``visualize``, their header,
findings panel, tables and the numbers behind the figures."""
