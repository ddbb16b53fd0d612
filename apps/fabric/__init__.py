"""`camus demo fabric`: the paper's routing measurements (§VIII-G, Figures 13-15) on a k = 4
fat tree and power-law graphs, as PNG plots; `measure` holds the measurements, which
bench/routing.py prints as tables."""
