"""The front half: a TFLite model validated, imported into Relax with TVM's TFLite frontend,
partitioned into "ethos-u" functions under Vela's operator constraints and legalized to NPU
primitive ops (`cascader.ir.npu_ops`). The pass list is `passes`."""
