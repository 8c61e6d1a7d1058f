from mst.cli import main

main()
