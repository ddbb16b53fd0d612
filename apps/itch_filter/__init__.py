"""ITCH 5.0 market data over MoldUDP64, filtered by camus: feed, subscribers, the latency demo.

See README.md in this folder for `camus demo itch`.
"""
