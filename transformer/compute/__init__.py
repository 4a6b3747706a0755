"""Where and how tensors are computed: the one probe of the CPU and GPU (`hardware`), what `auto` precision means on
them (`auto`), and devices, seeds and autocast (`runtime`). It may import `core`."""
