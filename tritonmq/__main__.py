from tritonmq.cli import main

main()
