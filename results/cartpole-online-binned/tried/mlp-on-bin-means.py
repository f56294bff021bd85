import sys, numpy as np, gymnasium as gym, torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from rlft.codecs import load_codec
from rlft.sources.hyperparams import load_hyperparams
codec_dir, seed = sys.argv[1], int(sys.argv[2])
codec = load_codec(codec_dir) if codec_dir != "none" else None
class Binned(gym.ObservationWrapper):
    def observation(self, obs):
        if codec is None: return obs
        q, _ = codec.box_to_ints(np.asarray(obs)[None], "observation")
        return codec.ints_to_box(q, "observation")[0].astype(np.float32)
hp = load_hyperparams("ppo", "CartPole-v1")
venv = make_vec_env("CartPole-v1", n_envs=hp.n_envs, seed=seed, wrapper_class=Binned)
m = PPO(hp.policy, venv, seed=seed, verbose=0, device="cpu", **hp.algo_kwargs())
m.learn(100000)
env = Binned(gym.make("CartPole-v1")); rets=[]
for ep in range(10):
    o,_=env.reset(seed=1000+ep); done=False; R=0
    while not done:
        a,_=m.predict(o, deterministic=True); o,r,te,tr,_=env.step(a); R+=r; done=te or tr
    rets.append(R)
print(codec_dir, seed, np.mean(rets))
