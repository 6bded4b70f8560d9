"""The TVM lowering flow: TFLite -> Relax -> Ethos-U functions -> TIR -> command stream."""
