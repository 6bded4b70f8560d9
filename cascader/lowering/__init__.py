"""The TVM lowering hook: `relax_to_tir` takes a partitioned Relax module, schedules its
"ethos-u" functions (`cascader.schedule`), lowers each schedule to TIR (TE computes, s_tir
stripe loops, extern NPU calls) and compiles the command stream back from that TIR."""
