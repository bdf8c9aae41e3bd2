"""A Keras 3 job (torch backend) as its users write it, with no Overtime call: a tiny model,
random data served by a PyDataset that takes 50 ms a batch (a slow input pipeline), run
until JOB_UNTIL (a Unix time). Usage: keras_job.py fit|evaluate|predict VERBOSE"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np

mode, verbose = sys.argv[1], int(sys.argv[2])
until = float(os.environ["JOB_UNTIL"])
BATCH_SECONDS = 0.05


class SlowBatches(keras.utils.PyDataset):
    def __init__(self, batches, labels=True):
        super().__init__()
        self.batches = batches
        self.labels = labels

    def __len__(self):
        return self.batches

    def __getitem__(self, index):
        time.sleep(BATCH_SECONDS)
        x = np.random.rand(16, 8).astype("float32")
        return (x, x.sum(axis=1, keepdims=True)) if self.labels else x


class StopAt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if time.time() >= until:
            self.model.stop_training = True


model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse", metrics=["mae"])
left = max(1, int((until - time.time()) / BATCH_SECONDS) + 1)
if mode == "fit":
    model.fit(SlowBatches(40), validation_data=SlowBatches(10), epochs=10000, verbose=verbose, callbacks=[StopAt()])
elif mode == "evaluate":
    model.evaluate(SlowBatches(left), verbose=verbose)
else:
    model.predict(SlowBatches(left, labels=False), verbose=verbose)
print("job done", flush=True)
