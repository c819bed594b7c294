"""MPE scenarios run inside TensorFlow graphs."""
