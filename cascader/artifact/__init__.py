"""What a firmware build takes from a design point: the model as TensorFlow Lite Micro's
Ethos-U kernel runs it (`firmware_tflite`)."""
