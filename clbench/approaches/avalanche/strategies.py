"""Every strategy of `avalanche.training` (avalanche-lib 0.6.0) as a clbench method `av-<name>`.

Each hyper-parameter is a strategy's own constructor argument, under Avalanche's name, with Avalanche's default as
its signature writes it (file and line below, in `site-packages/avalanche/training/`; `tests/approaches/
test_avalanche_table.py` checks every default against the installed signature). An argument Avalanche requires
without a default takes the value of Avalanche's own example for that strategy (named in its doc) or, where there is
none, the value said in the doc. Arguments that are not hyper-parameters come from clbench's spec: the network
(`model`, or the feature extractor and classifier), the optimiser, the batch sizes, the epochs, the device; GSS's
`input_size` is the data's shape. A strategy that needs pre-trained weights, a generator or a network of its own is
refused in one line with the reason (`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from clbench.approaches.avalanche.adapter import AvalancheApproach
from clbench.approaches.datatypes import Hyperparameters
from clbench.nets import MultiHeadNet
from clbench.spec import DataSpec, TrainingSpec
from clbench.spec.fields import field

SIGNATURES = "avalanche/training/supervised/strategy_wrappers.py"

# ------------------------------------------------------------------------------------------ replay


@dataclass(frozen=True)
class MemSize(Hyperparameters):
    mem_size: int = field(200, doc="samples in the replay memory (Avalanche's default 200)", minimum=1)


@dataclass(frozen=True)
class MemBatch(MemSize):
    batch_size_mem: int = field(10, doc="memory samples replayed per step (Avalanche's default 10)", minimum=1)


@dataclass(frozen=True)
class DERHyperparameters(MemSize):
    batch_size_mem: int | None = field(None, doc="memory samples replayed per step (Avalanche's default None: the "
                                                 "training batch size)", minimum=1)
    alpha: float = field(0.1, doc="weight of the logit-matching (MSE) term (Avalanche's default 0.1)", minimum=0.0)
    beta: float = field(0.5, doc="weight of the replayed cross-entropy (Avalanche's default 0.5; 0: DER, > 0: DER++)",
                        minimum=0.0)


@dataclass(frozen=True)
class GEMHyperparameters(Hyperparameters):
    patterns_per_exp: int = field(256, doc="samples kept per experience (required in Avalanche; its example "
                                           "examples/gem_agem_mnist.py: 256)", minimum=1)
    memory_strength: float = field(0.5, doc="offset added to the projection (Avalanche's default 0.5)", minimum=0.0)


@dataclass(frozen=True)
class AGEMHyperparameters(Hyperparameters):
    patterns_per_exp: int = field(256, doc="samples kept per experience (required in Avalanche; its example "
                                           "examples/gem_agem_mnist.py: 256)", minimum=1)
    sample_size: int = field(64, doc="memory samples drawn for the reference gradient (Avalanche's default 64)",
                             minimum=1)


@dataclass(frozen=True)
class MIRHyperparameters(Hyperparameters):
    mem_size: int = field(200, doc="samples in the replay memory (required in Avalanche; clbench: 200, Replay's "
                                   "default)", minimum=1)
    subsample: int = field(50, doc="memory candidates scored per step (required in Avalanche; clbench: 50, MIR "
                                   "paper's setting, Aljundi et al. 2019)", minimum=1)
    batch_size_mem: int = field(1, doc="memory samples replayed per step (Avalanche's default 1)", minimum=1)


@dataclass(frozen=True)
class ERAMLHyperparameters(MemBatch):
    temp: float = field(0.1, doc="temperature of the metric loss (Avalanche's default 0.1)", above=0.0)
    base_temp: float = field(0.07, doc="base temperature of the metric loss (Avalanche's default 0.07)", above=0.0)
    same_task_neg: bool = field(True, doc="negatives from the same task only (Avalanche's default true)")


@dataclass(frozen=True)
class GSSHyperparameters(MemSize):
    mem_strength: int = field(1, doc="memory samples compared per incoming sample (Avalanche's default 1)",
                              minimum=1)


@dataclass(frozen=True)
class CoPEHyperparameters(MemSize):
    alpha: float = field(0.99, doc="momentum of the prototypes' update (Avalanche's default 0.99)", minimum=0.0,
                         maximum=1.0)
    T: float = field(0.1, doc="temperature of the pseudo-prototypical proxy loss (Avalanche's default 0.1)",
                     above=0.0)


@dataclass(frozen=True)
class BiCHyperparameters(MemSize):
    val_percentage: float = field(0.1, doc="share of the memory held out for the bias layer (Avalanche's default "
                                           "0.1)", above=0.0, maximum=1.0)
    T: int = field(2, doc="distillation temperature (Avalanche's default 2)", minimum=1)
    stage_2_epochs: int = field(200, doc="epochs of the bias-correction stage (Avalanche's default 200)", minimum=1)
    lamb: float = field(-1.0, doc="distillation weight (Avalanche's default -1: seen/total classes)", minimum=-1.0)
    lr: float = field(0.1, doc="learning rate of the bias-correction stage (Avalanche's default 0.1)", above=0.0)


@dataclass(frozen=True)
class MERHyperparameters(MemBatch):
    n_inner_steps: int = field(5, doc="inner Reptile steps per batch (Avalanche's default 5)", minimum=1)
    beta: float = field(0.1, doc="within-batch meta step size (Avalanche's default 0.1)", minimum=0.0)
    gamma: float = field(0.1, doc="across-batch meta step size (Avalanche's default 0.1)", minimum=0.0)


@dataclass(frozen=True)
class ICaRLHyperparameters(Hyperparameters):
    memory_size: int = field(2000, doc="exemplars kept over every class (required in Avalanche; its example "
                                       "examples/icarl.py: 2000)", minimum=1)
    fixed_memory: bool = field(True, doc="a memory of memory_size from the start (required in Avalanche; its "
                                         "example examples/icarl.py: true)")


# ------------------------------------------------------------------------------------------ regularisation


@dataclass(frozen=True)
class EWCHyperparameters(Hyperparameters):
    ewc_lambda: float = field(0.4, doc="penalty weight (required in Avalanche; its example examples/ewc_mnist.py: "
                                       "0.4)", minimum=0.0)
    mode: str = field("separate", doc="one penalty per experience (separate) or one running one (online); "
                                      "Avalanche's default separate", choices=("separate", "online"))
    decay_factor: float | None = field(None, doc="decay of the online importance (Avalanche's default None; "
                                                 "mode=online needs it)", minimum=0.0, maximum=1.0)
    keep_importance_data: bool = field(False, doc="keep every experience's importance in online mode (Avalanche's "
                                                  "default false)")


@dataclass(frozen=True)
class LwFHyperparameters(Hyperparameters):
    alpha: float = field(1.0, doc="distillation weight (required in Avalanche; its example examples/lwf_mnist.py "
                                  "takes one per experience, 0 to 3.2; clbench: 1)", minimum=0.0)
    temperature: float = field(1.0, doc="softmax temperature of the distillation (required in Avalanche; its "
                                        "example examples/lwf_mnist.py: 1)", above=0.0)


@dataclass(frozen=True)
class LFLHyperparameters(Hyperparameters):
    lambda_e: float = field(0.0001, doc="weight of the mean squared distance between the network's features and the "
                                        "previous network's (required in Avalanche; its example "
                                        "examples/lfl_mnist.py, on PermutedMNIST: 0.0001)", minimum=0.0)


@dataclass(frozen=True)
class SIHyperparameters(Hyperparameters):
    si_lambda: float = field(1.0, doc="penalty weight (required in Avalanche; clbench: 1, Zenke et al.'s c on split "
                                      "MNIST)", minimum=0.0)
    eps: float = field(1e-07, doc="damping of the importance's denominator (Avalanche's default 1e-7)", above=0.0)


@dataclass(frozen=True)
class MASHyperparameters(Hyperparameters):
    lambda_reg: float = field(1.0, doc="penalty weight (Avalanche's default 1)", minimum=0.0)
    alpha: float = field(0.5, doc="weight of the previous importance in the running mean (Avalanche's default 0.5)",
                         minimum=0.0, maximum=1.0)


@dataclass(frozen=True)
class FromScratchHyperparameters(Hyperparameters):
    reset_optimizer: bool = field(True, doc="reset the optimiser with the network at each experience (Avalanche's "
                                            "default true)")


# ------------------------------------------------------------------------------------------ the methods


class AvNaive(AvalancheApproach):
    """Avalanche's `Naive`: fine-tuning, nothing against forgetting (avalanche-lib 0.6.0 `strategy_wrappers.py:67`)."""

    name, strategy_class, signature = "av-naive", "Naive", f"{SIGNATURES}:67"
    summary = "Avalanche's Naive (avalanche.training.Naive): fine-tuning"


class AvCumulative(AvalancheApproach):
    """Avalanche's `Cumulative`: each experience trained on with every earlier one's data (`cumulative.py:21`)."""

    name, strategy_class, signature = "av-cumulative", "Cumulative", "avalanche/training/supervised/cumulative.py:21"
    summary = "Avalanche's Cumulative (avalanche.training.Cumulative): every task's data so far"


class AvFromScratchTraining(AvalancheApproach):
    """Avalanche's `FromScratchTraining`: the network reset before each experience (`strategy_wrappers.py:1618`)."""

    name, strategy_class, signature = "av-fromscratchtraining", "FromScratchTraining", f"{SIGNATURES}:1618"
    summary = "Avalanche's FromScratchTraining (avalanche.training.FromScratchTraining): reset at each task"
    hyperparameters_class = FromScratchHyperparameters


class AvReplay(AvalancheApproach):
    """Avalanche's `Replay`: a class-balanced memory joined to each batch (`strategy_wrappers.py:343`)."""

    name, strategy_class, signature = "av-replay", "Replay", f"{SIGNATURES}:343"
    summary = "Avalanche's Replay (avalanche.training.Replay): experience replay"
    hyperparameters_class = MemSize


class AvGDumb(AvalancheApproach):
    """Avalanche's `GDumb`: a class-balanced memory, the network trained from scratch on it (`strategy_wrappers.py:
    771`)."""

    name, strategy_class, signature = "av-gdumb", "GDumb", f"{SIGNATURES}:771"
    summary = "Avalanche's GDumb (avalanche.training.GDumb): greedy memory, fit from scratch"
    hyperparameters_class = MemSize


class AvGEM(AvalancheApproach):
    """Avalanche's `GEM`: gradient episodic memory, a quadratic programme per step (`strategy_wrappers.py:980`)."""

    name, strategy_class, signature = "av-gem", "GEM", f"{SIGNATURES}:980"
    summary = "Avalanche's GEM (avalanche.training.GEM): gradient episodic memory"
    hyperparameters_class = GEMHyperparameters


class AvAGEM(AvalancheApproach):
    """Avalanche's `AGEM`: averaged GEM (`strategy_wrappers.py:909`)."""

    name, strategy_class, signature = "av-agem", "AGEM", f"{SIGNATURES}:909"
    summary = "Avalanche's AGEM (avalanche.training.AGEM): averaged gradient episodic memory"
    hyperparameters_class = AGEMHyperparameters


class AvEWC(AvalancheApproach):
    """Avalanche's `EWC`: elastic weight consolidation (`strategy_wrappers.py:1051`)."""

    name, strategy_class, signature = "av-ewc", "EWC", f"{SIGNATURES}:1051"
    summary = "Avalanche's EWC (avalanche.training.EWC): elastic weight consolidation"
    hyperparameters_class = EWCHyperparameters


class AvLwF(AvalancheApproach):
    """Avalanche's `LwF`: learning without forgetting (`strategy_wrappers.py:838`)."""

    name, strategy_class, signature = "av-lwf", "LwF", f"{SIGNATURES}:838"
    summary = "Avalanche's LwF (avalanche.training.LwF): learning without forgetting"
    hyperparameters_class = LwFHyperparameters


class AvLFL(AvalancheApproach):
    """Avalanche's `LFL`: less-forgetting learning (`strategy_wrappers.py:1299`), in the domain scenario: after the
    first experience it freezes the network's last linear layer, the one shared head (`plugins/lfl.py`,
    `after_training_exp`: `get_last_fc_layer`), and adds lambda_e times the mean squared distance between the body's
    features and the previous network's (`penalty`, `mse_loss`)."""

    name, strategy_class, signature = "av-lfl", "LFL", f"{SIGNATURES}:1299"
    summary = "Avalanche's LFL (avalanche.training.LFL): less-forgetting learning, domain scenario"
    hyperparameters_class = LFLHyperparameters
    task_scenario_refusal = ("it freezes the network's last linear layer as the one classifier of every task "
                             "(plugins/lfl.py: get_last_fc_layer); with a head per task that is the last task's head; "
                             "use data.scenario=domain")
    class_scenario_refusal = ("it freezes the network's last linear layer after the first experience "
                              "(plugins/lfl.py: get_last_fc_layer), so the classes of later experiences could not be "
                              "learnt; use data.scenario=domain")

    def strategy_arguments(self, body: MultiHeadNet) -> dict[str, Any]:
        from clbench.approaches.avalanche import bridge

        return {"model": bridge.SharedHeadWithFeatures(body)}


class AvSynapticIntelligence(AvalancheApproach):
    """Avalanche's `SynapticIntelligence` (`strategy_wrappers.py:1142`)."""

    name, strategy_class, signature = "av-synapticintelligence", "SynapticIntelligence", f"{SIGNATURES}:1142"
    summary = "Avalanche's SynapticIntelligence (avalanche.training.SynapticIntelligence): SI"
    hyperparameters_class = SIHyperparameters


class AvMAS(AvalancheApproach):
    """Avalanche's `MAS`: memory aware synapses (`strategy_wrappers.py:1367`); its `verbose` is left false."""

    name, strategy_class, signature = "av-mas", "MAS", f"{SIGNATURES}:1367"
    summary = "Avalanche's MAS (avalanche.training.MAS): memory aware synapses"
    hyperparameters_class = MASHyperparameters


class AvDER(AvalancheApproach):
    """Avalanche's `DER`: dark experience replay, DER++ with beta > 0 (`der.py:158`)."""

    name, strategy_class, signature = "av-der", "DER", "avalanche/training/supervised/der.py:158"
    summary = "Avalanche's DER (avalanche.training.DER): dark experience replay (++)"
    hyperparameters_class = DERHyperparameters
    task_scenario_refusal = "it calls the network without task labels (der.py:47: `model(x)`), one head for all"


class AvERACE(AvalancheApproach):
    """Avalanche's `ER_ACE`: ER with asymmetric cross-entropy (`er_ace.py:34`)."""

    name, strategy_class, signature = "av-er-ace", "ER_ACE", "avalanche/training/supervised/er_ace.py:34"
    summary = "Avalanche's ER_ACE (avalanche.training.ER_ACE): asymmetric cross-entropy replay"
    hyperparameters_class = MemBatch


class AvMIR(AvalancheApproach):
    """Avalanche's `MIR`: maximally interfered retrieval (`strategy_wrappers.py:1536`)."""

    name, strategy_class, signature = "av-mir", "MIR", f"{SIGNATURES}:1536"
    summary = "Avalanche's MIR (avalanche.training.MIR): maximally interfered retrieval"
    hyperparameters_class = MIRHyperparameters


class AvMER(AvalancheApproach):
    """Avalanche's `MER`: meta-experience replay (`mer.py:53`)."""

    name, strategy_class, signature = "av-mer", "MER", "avalanche/training/supervised/mer.py:53"
    summary = "Avalanche's MER (avalanche.training.MER): meta-experience replay"
    hyperparameters_class = MERHyperparameters


class AvGSSGreedy(AvalancheApproach):
    """Avalanche's `GSS_greedy`: gradient-based sample selection (`strategy_wrappers.py:700`); `input_size` is the
    data's shape."""

    name, strategy_class, signature = "av-gss-greedy", "GSS_greedy", f"{SIGNATURES}:700"
    summary = "Avalanche's GSS_greedy (avalanche.training.GSS_greedy): gradient-based sample selection"
    hyperparameters_class = GSSHyperparameters
    task_scenario_refusal = ("it calls the network without task labels (plugins/gss_greedy.py), one head for "
                             "all")

    def strategy_hyperparameters(self) -> dict[str, Any]:
        return {**super().strategy_hyperparameters(), "input_size": list(self.context.input_shape)}


class AvCoPE(AvalancheApproach):
    """Avalanche's `CoPE`: continual prototype evolution (`strategy_wrappers.py:1219`); `n_classes` and `p_size` are
    the number of classes (the network's outputs are the prototypes' space)."""

    name, strategy_class, signature = "av-cope", "CoPE", f"{SIGNATURES}:1219"
    summary = "Avalanche's CoPE (avalanche.training.CoPE): continual prototype evolution"
    hyperparameters_class = CoPEHyperparameters
    not_resumable = "its prototype memory and normalised head are not restored from a checkpoint yet"
    task_scenario_refusal = "its prototypes are over every class of one output (class-incremental)"
    refuses_domain = "its prototypes are over every class of one output (class-incremental)"

    def strategy_hyperparameters(self) -> dict[str, Any]:
        classes = sum(self.context.head_sizes)
        return {**super().strategy_hyperparameters(), "n_classes": classes, "p_size": classes}


def bic_scheduler_problem() -> str | None:
    """Why Avalanche's BiC fails after its first experience with the installed torch (its scheduler's `verbose`,
    which torch deprecated in 2.2 and has since removed), or None."""
    import inspect

    import torch
    from torch.optim.lr_scheduler import MultiStepLR

    if "verbose" in inspect.signature(MultiStepLR.__init__).parameters:
        return None
    return (f"avalanche-lib 0.6.0's BiC plugin builds its bias-correction scheduler as MultiStepLR(..., "
            f"verbose=False) (avalanche/training/plugins/bic.py:383-385), and torch {torch.__version__}'s "
            "MultiStepLR has no verbose argument: it would fail after the first task (a torch whose MultiStepLR "
            "takes verbose runs it)")


class AvBiC(AvalancheApproach):
    """Avalanche's `BiC`: bias correction (`strategy_wrappers.py:1445`); its plugin holds out a validation share
    of each experience by reassigning the experience's dataset, so it trains on a reassignable copy."""

    name, strategy_class, signature = "av-bic", "BiC", f"{SIGNATURES}:1445"
    summary = "Avalanche's BiC (avalanche.training.BiC): bias correction"
    hyperparameters_class = BiCHyperparameters
    task_scenario_refusal = "its bias layers correct the new classes' logits of one output (class-incremental)"
    refuses_domain = "its bias layers correct the new classes' logits of one output (class-incremental)"

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        problem = super().protocol_problem(training, data, hyperparameters)
        if problem is None and (scheduler := bic_scheduler_problem()) is not None:
            return f"{cls.strategy_class} cannot run here: {scheduler}"
        return problem

    def training_experience(self, experience: Any) -> Any:
        """A copy whose dataset BiC's plugin may replace by the share it does not hold out (plugins/bic.py:173)."""
        from clbench.approaches.avalanche import bridge

        return bridge.reassignable(experience)


class _FeatureStrategy(AvalancheApproach):
    """A strategy that takes the body and the classifier apart (the class scenario's output over every class)."""

    task_scenario_refusal = "it takes one classifier over every class (class-incremental)"
    refuses_domain = "it takes one classifier over every class (class-incremental)"


class AvICaRL(_FeatureStrategy):
    """Avalanche's `ICaRL`: nearest-mean-of-exemplars, herding (`icarl.py:29`); no `buffer_transform` (clbench's
    augmentation is off for Avalanche's strategies)."""

    name, strategy_class, signature = "av-icarl", "ICaRL", "avalanche/training/supervised/icarl.py:29"
    summary = "Avalanche's ICaRL (avalanche.training.ICaRL): nearest mean of exemplars"
    hyperparameters_class = ICaRLHyperparameters

    def strategy_arguments(self, body: MultiHeadNet) -> dict[str, Any]:
        from clbench.approaches.avalanche import bridge

        return {"feature_extractor": bridge.Features(body), "classifier": bridge.AllHeads(body),
                "buffer_transform": None}

    def strategy_outputs(self, inputs: Any) -> Any:
        """Before the first task iCaRL has no class means: every class scores 0 (its nearest-mean classifier
        asserts there)."""
        if self.strategy.model.eval_classifier.class_means is None:
            return inputs.new_zeros(inputs.shape[0], sum(self.context.head_sizes))
        return super().strategy_outputs(inputs)


class AvERAML(_FeatureStrategy):
    """Avalanche's `ER_AML`: ER with asymmetric metric learning (`er_aml.py:29`)."""

    name, strategy_class, signature = "av-er-aml", "ER_AML", "avalanche/training/supervised/er_aml.py:29"
    summary = "Avalanche's ER_AML (avalanche.training.ER_AML): asymmetric metric learning replay"
    hyperparameters_class = ERAMLHyperparameters
    refusal = ("not verified under clbench yet: a 3-task tiny run of it did not finish in 60 s on a 2-core CPU "
               "(its metric loss), so clbench does not run it")

    def strategy_arguments(self, body: MultiHeadNet) -> dict[str, Any]:
        from clbench.approaches.avalanche import bridge

        return {**super().strategy_arguments(body), "feature_extractor": bridge.Features(body)}


# ------------------------------------------------------------------------------------------ refused


def _refused(class_name: str, method: str, strategy: str, line: str, reason: str) -> type[AvalancheApproach]:
    """A strategy clbench lists but refuses, with the reason."""
    attributes: dict[str, ClassVar[Any]] = {
        "__doc__": f"Avalanche's `{strategy}` ({line}): refused, {reason}.", "name": method,
        "strategy_class": strategy, "signature": line, "refusal": reason,
        "summary": f"Avalanche's {strategy} (avalanche.training.{strategy}): refused, {reason}",
        "__module__": __name__, "__qualname__": class_name}
    return type(class_name, (AvalancheApproach,), attributes)


AvAR1 = _refused("AvAR1", "av-ar1", "AR1", "avalanche/training/supervised/ar1.py:44",
                 "it fine-tunes a MobileNetV1 pre-trained on ImageNet (pytorchcv weights), not the spec's network")
AvStreamingLDA = _refused("AvStreamingLDA", "av-streaminglda", "StreamingLDA",
                          "avalanche/training/supervised/deep_slda.py:31",
                          "it fits a linear discriminant on a pre-trained, frozen feature extractor")
AvExpertGateStrategy = _refused("AvExpertGateStrategy", "av-expertgatestrategy", "ExpertGateStrategy",
                                "avalanche/training/supervised/expert_gate.py:43",
                                "its experts are an ImageNet pre-trained AlexNet with autoencoder gates")
AvLearningToPrompt = _refused("AvLearningToPrompt", "av-learningtoprompt", "LearningToPrompt",
                              "avalanche/training/supervised/l2p.py:32",
                              "it prompts a pre-trained vision transformer (timm weights)")
AvGenerativeReplay = _refused("AvGenerativeReplay", "av-generativereplay", "GenerativeReplay", f"{SIGNATURES}:422",
                              "it replays the samples of a generator (a VAE strategy) trained beside the classifier")
AvVAETraining = _refused("AvVAETraining", "av-vaetraining", "VAETraining", f"{SIGNATURES}:634",
                         "it trains a variational autoencoder (a generator), not a classifier")
AvAETraining = _refused("AvAETraining", "av-aetraining", "AETraining", f"{SIGNATURES}:561",
                        "it trains an autoencoder, not a classifier")
AvPNNStrategy = _refused("AvPNNStrategy", "av-pnnstrategy", "PNNStrategy", f"{SIGNATURES}:127",
                         "it trains Avalanche's own progressive network (avalanche.models.PNN), not the spec's network "
                         "(clbench's pnn is the method on the spec's)")
AvPackNet = _refused("AvPackNet", "av-packnet", "PackNet", f"{SIGNATURES}:202",
                     "it trains Avalanche's PackNetModel wrapper of its own layers, whose pruning schedule "
                     "(post_prune_epochs) runs outside the epochs clbench's protocol counts")
AvCWRStar = _refused("AvCWRStar", "av-cwrstar", "CWRStar", f"{SIGNATURES}:271",
                     "it consolidates one named linear output layer over every class (cwr_layer_name); the spec's "
                     "network has one head per task")
AvJointTraining = _refused("AvJointTraining", "av-jointtraining", "JointTraining",
                           "avalanche/training/supervised/joint_training.py:59",
                           "it trains once on every experience together, not task by task (clbench's `joint` is that "
                           "reference)")
AvSCR = _refused("AvSCR", "av-scr", "SCR", "avalanche/training/supervised/supervised_contrastive_replay.py:35",
                 "it needs its own SCRModel (a projection network beside the body) and torchvision augmentations")
AvFeatureReplay = _refused("AvFeatureReplay", "av-featurereplay", "FeatureReplay",
                           "avalanche/training/supervised/feature_replay.py:48",
                           "it replays features at a named last layer (last_layer_name) over every class; the spec's "
                           "network has one head per task")
