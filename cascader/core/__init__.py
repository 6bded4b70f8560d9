"""The cascader core: stripes, plans and proposals, runnable without TVM."""
