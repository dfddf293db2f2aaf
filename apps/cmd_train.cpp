// `zerodp train` (docs/reference/command-line.md#train): flags and --config resolved by apps/train_options, then the
// training loop of train/trainer.
#include "apps/commands.h"
#include "apps/train_options.h"
#include "train/trainer.h"

namespace zerodp::cli {
namespace {

TrainOptions g_options;

void register_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train",
                                 "Train a model (GPT-2, the Llama family) with ZeRO data parallelism (run under `mpirun -n W` for W ranks)");
  add_train_options(cmd, g_options);
  const TrainExtension& extension = train_extension();
  if (extension.add_flags) extension.add_flags(cmd);
  cmd->callback([&action, cmd] {
    action = [cmd] {
      const TrainExtension& ext = train_extension();
      train::run_training(resolve(g_options, cmd), ext.hooks ? ext.hooks() : train::TrainHooks{});
      return 0;
    };
  });
}
const CommandRegistration train_registration(40, register_train);

}  // namespace
}  // namespace zerodp::cli
