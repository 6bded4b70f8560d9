"""The NPU's intermediate representation: primitive ops, tensor layouts, units and the stripe
Schedule that codegen, the reference, the simulator and TIR lowering all read. It imports
nothing else of this project."""
