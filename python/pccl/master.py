"""python3 -m pccl.master [--listen-address HOST:PORT]: a master in a Python process (the
pccl-master binary is the same code without Python). Stops on SIGINT / SIGTERM."""
import argparse
import logging
import signal
import threading

from pccl import MasterNode


def main(argv=None):
    parser = argparse.ArgumentParser(description="PCCL master node")
    parser.add_argument("--listen-address", default="0.0.0.0:48148",
                        help="address to listen on, HOST:PORT (default 0.0.0.0:48148)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with MasterNode(args.listen_address) as master:
        master.run()
        logging.info("master listening on %s", args.listen_address)
        # Wait in Python, not in C, so that the signal handlers run.
        while not stop.wait(0.5):
            pass
        logging.info("shutting down")
        master.interrupt()
        master.await_termination()


if __name__ == "__main__":
    main()
