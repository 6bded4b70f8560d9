"""dse: design-space exploration of Ethos-U SRAM size and cascader options."""
