"""The report's figures, each written as PNG and SVG."""
