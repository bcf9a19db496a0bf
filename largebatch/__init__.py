"""What every package of this project shares: its errors and exit statuses
(:mod:`largebatch.errors`), what a launcher tells a process
(:mod:`largebatch.launchers`) and whether a process runs
(:mod:`largebatch.processes`). It loads neither Chainer nor NumPy."""
