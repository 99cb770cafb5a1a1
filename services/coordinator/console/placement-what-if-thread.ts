/** The placement what-if's simulation on its own thread (placement-what-if.ts starts it). */
import { parentPort, workerData } from 'node:worker_threads';
import { simulatePlacement, type SimulationInput } from '../../../core/placement-simulation.js';

parentPort!.postMessage(simulatePlacement(workerData as SimulationInput));
