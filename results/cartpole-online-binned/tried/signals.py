# Print an online run's return and SB3 update signals per 10k steps: python signals.py FILE.json
import json, sys, numpy as np
d=json.load(open(sys.argv[1]))
c=np.array(d['curve']); sig=d['update_signals']
print(sys.argv[1], "eval", d['eval']['mean'], "train_s", d['train_seconds'])
for lo in range(0,100000,10000):
    m=(c[:,0]>=lo)&(c[:,0]<lo+10000)
    ss=[s for s in sig if lo<=s['step']<lo+10000]
    f=lambda k: np.mean([s[k] for s in ss]); mx=lambda k: np.max([s[k] for s in ss])
    print(f"{lo:6d} ret {c[m,1].mean() if m.any() else float('nan'):6.1f} kl {f('approx_kl'):.4f} klmax {mx('approx_kl'):.3f} clip {f('clip_fraction'):.3f} ent {-f('entropy_loss'):.3f} ev {f('explained_variance'):.2f} vl {f('value_loss'):.2f}")
