"""Studies: many runs planned, run and summed up, and the measurements that stand beside them.

experiments        the paper's experiments as data, sized by a profile (quick, default, paper, text8): the points
sweep              systems x nodes x cores x rates, one run each, resuming from the recorded points
reproduce          a profile's whole plan: its data, every point through the sweep, its manifest
time_to_accuracy   P@1 against training seconds for the sampling arms, one after the other on this machine
ceiling            what the data allows: the count predictor's P@1 on skip-gram sets
realism            how much a generated dataset behaves like the real one it stands for
roofline           each phase of a training step against the machine's memory bandwidth
"""
